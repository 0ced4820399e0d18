# The probe variants and GPU config tests of the attempt-25/26/27 device scripts, in one place, so that the
# cubin packs are built for exactly what the scripts run (sourced by both scripts, and here):
#
#     source benchmarks/attempt25_lists.sh
#     bash benchmarks/cubin_cache.sh a25 --tests "$A25_TESTS" --probe "$A25_B8"
#     bash benchmarks/cubin_cache.sh b1g8 --probe "$A25_B1,$A25_G8"
# shellcheck disable=SC2034
A25_B8="ship b8,s25 b8 cb early,s25 b8 rg2 occ2,s25 b8 rg2 occ2 nww8,s25 b8 rg4 occ1 nww8,s25 b8 rg4 occ2 nww8"
A25_B8="$A25_B8,s25 b8 rg2 occ3,s25 b8 scan occ2,s25 b8 scan occ4,s25 b8 f14,s25 b8 f22,s25 b8 f30"
A25_B8="$A25_B8,s24 b8 t64x64 occ3 tk128,s24 b8 t64x64 occ4 tk64,s25 b8 batch2,s25 b8 batch2 stagger"
A25_B8="$A25_B8,s25 b8 batch4 stagger,s25 b8 batch2 stagger cb early"
A25_B8="$A25_B8,s26 b8 tail t64x64 occ3 tk128,s26 b8 tail t64x64 occ4 tk64,s26 b8 tail t64x32 occ4 tk64"
A25_B8="$A25_B8,s26 b8 tail same,s26 b8 cb occ2,s26 b8 cb occ4,s27 b8 split2,s27 b8 split2 cb early"
A25_B8="$A25_B8,s27 b8 split2 t64x64 occ4 tk64"
A25_B1="ship b1,s25 b1 rg2 occ2,s25 b1 rg2 occ2 nww8,s25 b1 rg4 occ1 nww8,s25 b1 rg4 occ2 nww8,s25 b1 rg2 occ3"
A25_B1="$A25_B1,s25 b1 cb early,s25 b1 f14,s25 b1 f22,s25 b1 f30"
A25_B1="$A25_B1,s26 b1 tail t64x64 occ3 tk128,s26 b1 tail t64x64 occ4 tk64,s26 b1 tail t64x32 occ4 tk64"
A25_B1="$A25_B1,s26 b1 tail same,s26 b1 cb occ2,s26 b1 cb occ4,s27 b1 fixup,s27 b1 seg16,s27 b1 seg16 fixup"
A25_G8="ship g8,s25 g8 rg2 occ2,s25 g8 rg2 occ2 nww8,s25 g8 rg2 occ3,s25 g8 cb early,s25 g8 f10,s25 g8 f18"
A25_G8="$A25_G8,s25 g8 f26,s26 g8 cb occ2,s26 g8 cb occ4"
# substrings of the tests' names: pytest's -k joins them with "or"
A25_TESTS="row-group,cb-early,side_streams,state-form-14,state-form-8,state-form-22,state-form-30,batch,tail"
