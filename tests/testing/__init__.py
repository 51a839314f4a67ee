"""The test suite's helpers, importable from any test module (tests/ is on
sys.path under pytest): `testing.util` (the hermetic machine, running hills
in-process or as the real executables, file helpers), `testing.eval_fixtures`
(hills made from an evaluator's source, log and report readers) and one
module per area (warm, service, commands, keys, the Ray head, the guard over
the real HOME). The pytest fixtures that use them are in tests/conftest.py."""
