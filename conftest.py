"""pytest configuration for the repository root: nbval runs every notebook except the exercises.

Exercise notebooks fail by design (their check cells raise ``ExerciseFailed`` until the learner fills in
the TODO), so nbval must not collect them. ``tests/test_exercises.py`` runs them instead and asserts that
every check fails as shipped; the solutions in ``notebooks/solutions/`` run under nbval and must pass.
(This file lives at the root, not in notebooks/, so learners don't see it next to the notebooks.)
"""

collect_ignore_glob = ["notebooks/exercises/*"]
