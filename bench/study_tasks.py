"""The tuning tasks the cost-model study measures, taken from the benchmark models.

Tasks come from the same extraction ``tensorsmith tune`` uses, so a task here is a
kernel ``build`` really runs. A task is named ``model:label-prefix`` (e.g.
``resnet50:fused_conv2d_add_relu#e001``) or ``model:index`` (its position in
``extract_tasks``), so the study can be pointed at any kernel of any benchmark model.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.model_bench import BENCH_CONFIGS, EXTRA_CONFIGS  # noqa: E402
from bench.models import MODELS, input_shapes  # noqa: E402

# A 3x3 convolution of ResNet-50's third stage (used 5 times) and the BERT encoder's
# QKV-sized dense layer (used 12 times): both take milliseconds, so hundreds measure fast.
DEFAULT_TASKS = ("resnet50:fused_conv2d_add_relu#e001", "bert_encoder:fused_matmul_add#10d1")


def model_tasks(model_name: str) -> list:
    """``extract_tasks`` of a benchmark model at its benchmark configuration."""
    from tensorsmith.autotune.task import extract_tasks
    from tensorsmith.frontend.onnx import from_onnx

    configs = {**BENCH_CONFIGS, **EXTRA_CONFIGS}
    model = MODELS[model_name](**configs[model_name])
    mod, params = from_onnx(model, shape=input_shapes(model))
    return extract_tasks(mod, params, "llvm")


def find_task(spec: str):  # noqa: ANN201 (a tensorsmith.autotune.task.Task)
    """The task named by ``model:label`` or ``model:index``."""
    model_name, _, which = spec.partition(":")
    tasks = model_tasks(model_name)
    if which.isdigit():
        return tasks[int(which)]
    matches = [t for t in tasks if t.label.startswith(which)]
    if len(matches) != 1:
        raise SystemExit(f"{spec}: {len(matches)} tasks match; labels: "
                         f"{', '.join(t.label for t in tasks)}")
    return matches[0]
