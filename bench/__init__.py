"""tensorsmith benchmarks and the ONNX models they (and tests/test_models.py) use."""
