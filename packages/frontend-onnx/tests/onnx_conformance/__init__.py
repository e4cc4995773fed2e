"""ONNX's own node test cases (``onnx.backend.test``), run through a tensorsmith backend.

One module per job: :mod:`.cases` loads and names the cases, :mod:`.scope` says which
ones a tensor compiler takes, :mod:`.check` runs one case and gives a one-line verdict,
:mod:`.pool` runs many in isolated worker processes (a crash or a hang fails one case,
never the run), :mod:`.table` keeps the results and renders docs/onnx-conformance.md.
The pytest suite and ``tools/conformance_report.py`` share all of it.

It lives with the tests, outside ``src/``, because it is how this repository checks the
frontend, not something a user of the wheel calls: the wheel ships the backend it drives
(``tensorsmith.frontend.onnx.backend``), not the harness. ``tests/conftest.py`` puts
this folder's parent on ``sys.path``, and the case workers, spawned, inherit it.
"""
