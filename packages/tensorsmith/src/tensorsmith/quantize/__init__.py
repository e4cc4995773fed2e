"""Post-training quantization of ONNX models to the QDQ format (``tensorsmith quantize``).

    from tensorsmith.quantize import quantize
    result = quantize("model.onnx", "calibration.npz", method="entropy")
    onnx.save(result.model, "model.int8.onnx")
    print(format_report(result.report))

Only onnx and NumPy are needed, besides tensorsmith itself, which runs the float model
for calibration and both models for the accuracy report.
"""

from .calibration import terminal_progress
from .errors import QuantizeError
from .observers import METHODS
from .qdq import QUANTIZED_OPS
from .qparams import ACTIVATION_TYPES
from .quantizer import QuantizeResult, quantize
from .report import AccuracyReport, OutputAccuracy, format_report

__all__ = [
    "ACTIVATION_TYPES",
    "METHODS",
    "QUANTIZED_OPS",
    "AccuracyReport",
    "OutputAccuracy",
    "QuantizeError",
    "QuantizeResult",
    "format_report",
    "quantize",
    "terminal_progress",
]
