"""pytest configuration for the notebooks: nbval runs every notebook here except the exercises.

Exercise notebooks fail by design (their check cells raise ``ExerciseFailed`` until the learner fills in
the TODO), so nbval must not collect them. ``tests/test_exercises.py`` runs them instead and asserts that
every check fails as shipped; the solutions in ``notebooks/solutions/`` run here under nbval and must pass.
"""

collect_ignore_glob = ["exercises/*"]
