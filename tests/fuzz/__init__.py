"""A bounded, seeded fuzzer for tensorsmith (issue 16): four campaigns of generated cases,
each case run in a child process so that a crash or a hang is observed, not fatal.

    nox -s fuzz -- --cases 200 --seed 1
    PYTHONPATH=tests python -m fuzz --replay onnx:1000017
"""
