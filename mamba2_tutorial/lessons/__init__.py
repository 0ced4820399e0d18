"""What the notebooks and exercises use beside the SSD itself; each name is imported on first use.

===============  ==========================================================================================
``inputs.py``    named problem shapes (``SHAPES``) and seeded, realistic inputs (``make_inputs``)
``checks.py``    ``assert_close`` with dtype-aware tolerances and a report that explains what is wrong
``costs.py``     FLOP and memory counts of the three forms of the SSD and the four chunked steps
``callouts.py``  a function's source with numbered callouts, and side-by-side diffs (``show_source``)
``env.py``       the environment report: ``python -m mamba2_tutorial env``, the pre-class check
===============  ==========================================================================================
"""

from __future__ import annotations

from ..runtime.lazy import lazy_names

#: public name -> the module of this package that defines it
_EXPORTS = {
    "SSDShape": "inputs", "SHAPES": "inputs", "make_inputs": "inputs", "get_shape": "inputs",
    "assert_close": "checks", "default_tolerance": "checks", "relative_error": "checks",
    "ssd_gradients": "checks", "SSD_TENSOR_ARGS": "checks", "TOLERANCES": "checks",
    "Cost": "costs", "recurrent_cost": "costs", "quadratic_cost": "costs", "chunked_cost": "costs",
    "chunked_step_costs": "costs", "io_bytes": "costs", "sequential_steps": "costs", "form_cost": "costs",
    "FORMS": "costs",
    "MARKERS": "callouts", "CalloutListing": "callouts", "DiffListing": "callouts", "marker": "callouts",
    "show_callouts": "callouts", "show_diff": "callouts", "show_source": "callouts",
    "EnvironmentReport": "env", "environment_report": "env",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
