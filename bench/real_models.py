"""Benchmark tensorsmith on real architectures exported from PyTorch, against ONNX Runtime.

    python bench/real_models.py                               # the whole zoo
    python bench/real_models.py --list                        # what is in it
    python bench/real_models.py --models resnet18,bert,lstm --repeat 5
    python bench/real_models.py --exporter both --threads 4

bench/models.py writes its networks with onnx.helper; these come from the code people
actually export: timm, Hugging Face transformers (built from configs) and torch.nn, with
random weights (nothing is downloaded), batch 1 and fixed shapes, through torch's
TorchScript exporter (``dynamo=False``) and/or its dynamo exporter (``dynamo=True``).
Each exported model then goes through bench/model_bench.py's ``bench_model``: import,
compile, export and load with tensorsmith, and time against ONNX Runtime in this process,
interleaved. Prints a table, the geometric mean and the minimum of the ratios, and writes
bench/results/real_<date>_<time>.json. The ONNX files are cached (``--cache``).

Needs, besides the benchmark's usual onnx and onnxruntime (benchmark-only, never a
runtime dependency): ``pip install torch==2.13.0 timm transformers onnxscript``.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import math
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/real_models.py` puts bench/, not the root, on it
    sys.path.insert(0, str(ROOT))

import onnx  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from bench.errors import describe_failure  # noqa: E402
from bench.model_bench import ModelResult, bench_model  # noqa: E402
from bench.models import INT_RANGE_KEY, MODELS  # noqa: E402
from bench.report import _ms, _note, _num, environment, format_table, load_average  # noqa: E402

RESULTS_DIR = ROOT / "bench" / "results"
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "tsm-real-models"
EXPORTERS = ("torchscript", "dynamo")

Inputs = dict[str, torch.Tensor]


# ---- the zoo ------------------------------------------------------------------------


@dataclass(frozen=True)
class RealModel:
    """One architecture: ``build()`` makes the module and its example inputs; the first
    line of its docstring says what the model is."""

    name: str
    kind: str
    build: Callable[[], tuple[nn.Module, Inputs]]
    dynamo: bool = False  # also exported with the dynamo exporter by default
    vocab: int = 0  # token ids (input ``input_ids``) are drawn from [0, vocab)

    @property
    def about(self) -> str:
        return (self.build.__doc__ or "").strip().splitlines()[0]


_torchvision_ops: torch.library.Library | None = None


def _import_torchvision() -> None:
    """Import torchvision's Python half even where its compiled ops cannot load.

    timm imports torchvision, and so does transformers once torchvision is installed.
    PyPI's torchvision wheel links CUDA torch's libraries, so beside the CPU torch its
    ops library does not load, and ``import torchvision`` then fails on its fake-kernel
    registrations for ``nms`` and ``qnms``, the two that do not check for the ops.
    Declaring those two operators first lets the import go through; no model here runs a
    torchvision op, and none is a torchvision model.
    """
    global _torchvision_ops
    try:
        import torchvision  # noqa: F401
    except RuntimeError:
        for name in [n for n in sys.modules if n.partition(".")[0] == "torchvision"]:
            del sys.modules[name]
        _torchvision_ops = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            _torchvision_ops.define(
                f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
            )
        import torchvision  # noqa: F401
    except ImportError:  # not installed: timm needs it, transformers does not
        pass


def _image(size: int = 224) -> Inputs:
    return {"pixel_values": torch.randn(1, 3, size, size)}


def _timm(arch: str) -> Callable[[], tuple[nn.Module, Inputs]]:
    def build() -> tuple[nn.Module, Inputs]:
        import timm

        return timm.create_model(arch, pretrained=False), _image()

    build.__doc__ = f"timm {arch}, 224x224"
    return build


class FirstOutput(nn.Module):
    """A Hugging Face model, called with its inputs by name, that returns its first output
    (logits, hidden states) alone: the exporters take positional inputs."""

    def __init__(self, model: nn.Module, names: list[str]) -> None:
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.names, args)), return_dict=False)[0]


def _hf(model: nn.Module, inputs: Inputs) -> tuple[nn.Module, Inputs]:
    return FirstOutput(model, list(inputs)), inputs


def _tokens(vocab: int, seq: int, mask: bool = False) -> Inputs:
    inputs = {"input_ids": torch.randint(0, vocab, (1, seq))}
    if mask:  # the last quarter is padding, as bench.models.sample_inputs feeds it
        inputs["attention_mask"] = torch.ones(1, seq, dtype=torch.int64)
        inputs["attention_mask"][:, (3 * seq) // 4 :] = 0
    return inputs


def _bert() -> tuple[nn.Module, Inputs]:
    """transformers BertModel: BERT-base widths, 4 layers, sequence 128 with a padding mask"""
    from transformers import BertConfig, BertModel

    config = BertConfig(num_hidden_layers=4)  # hidden 768, 12 heads, FFN 3072: 4 of 12 layers
    return _hf(BertModel(config, add_pooling_layer=False), _tokens(30522, 128, mask=True))


def _gpt2() -> tuple[nn.Module, Inputs]:
    """transformers GPT2LMHeadModel: GPT-2 small widths, 4 layers, sequence 32, 50257 logits"""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=4, use_cache=False)  # 768 wide, 12 heads: 4 of its 12 layers
    return _hf(GPT2LMHeadModel(config), _tokens(50257, 32, mask=True))


def _llama() -> tuple[nn.Module, Inputs]:
    """transformers LlamaForCausalLM: 512 wide, 8 layers, 4 KV heads of 8, sequence 32"""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(  # llama2.c's 42M model, with grouped-query attention
        vocab_size=32000,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        use_cache=False,
    )
    return _hf(LlamaForCausalLM(config), _tokens(32000, 32, mask=True))


def _whisper_encoder() -> tuple[nn.Module, Inputs]:
    """transformers WhisperEncoder at whisper-tiny's size: 80 x 3000 mel frames, 4 layers"""
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = WhisperConfig(  # whisper-tiny's encoder: 30 s of 80 mel bins
        d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536
    )
    return _hf(WhisperEncoder(config), {"input_features": torch.randn(1, 80, 3000)})


class Recurrent(nn.Module):
    """A 2-layer LSTM or GRU over a sequence, and a linear head on its last step."""

    def __init__(self, cell: type[nn.LSTM] | type[nn.GRU], features: int = 128) -> None:
        super().__init__()
        self.rnn = cell(features, 256, num_layers=2, batch_first=True)
        self.head = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0][:, -1])


def _recurrent(cell: type[nn.LSTM] | type[nn.GRU]) -> Callable[[], tuple[nn.Module, Inputs]]:
    def build() -> tuple[nn.Module, Inputs]:
        return Recurrent(cell), {"sequence": torch.randn(1, 32, 128)}

    build.__doc__ = f"torch nn.{cell.__name__}, 2 layers of 256 over 32 steps of 128, a Linear head"
    return build


class UNet(nn.Module):
    """U-Net: a timm ResNet-18 encoder; decoder steps of 2x2 transposed convolution,
    concatenation with the skip, two 3x3 conv-BN-ReLU; then 1x1 to 21 classes and a
    bilinear resize to the input's size."""

    def __init__(self, classes: int = 21) -> None:
        import timm

        super().__init__()
        self.encoder = timm.create_model("resnet18", features_only=True, pretrained=False)
        channels = self.encoder.feature_info.channels()  # 64, 64, 128, 256, 512
        self.ups, self.blocks = nn.ModuleList(), nn.ModuleList()
        below = channels[-1]
        for skip in reversed(channels[:-1]):
            self.ups.append(nn.ConvTranspose2d(below, below // 2, 2, stride=2))
            self.blocks.append(
                nn.Sequential(*_conv_bn_relu(below // 2 + skip, skip), *_conv_bn_relu(skip, skip))
            )
            below = skip
        self.head = nn.Conv2d(below, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *skips, y = self.encoder(x)
        for up, block, skip in zip(self.ups, self.blocks, reversed(skips)):
            y = block(torch.cat([up(y), skip], dim=1))
        return F.interpolate(self.head(y), size=x.shape[-2:], mode="bilinear")


def _conv_bn_relu(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


def _unet() -> tuple[nn.Module, Inputs]:
    """U-Net on a timm resnet18 encoder, 224x224, 21 classes"""
    return UNet(), _image()


ZOO: dict[str, RealModel] = {
    m.name: m
    for m in [
        RealModel("resnet18", "cnn", _timm("resnet18"), dynamo=True),
        RealModel("resnet50", "cnn", _timm("resnet50")),
        RealModel("mobilenetv2", "cnn", _timm("mobilenetv2_100")),
        RealModel("efficientnet_b0", "cnn", _timm("efficientnet_b0"), dynamo=True),
        RealModel("densenet121", "cnn", _timm("densenet121")),
        RealModel("convnext_atto", "cnn", _timm("convnext_atto"), dynamo=True),
        RealModel("regnety_002", "cnn", _timm("regnety_002")),
        RealModel("vit_tiny", "vit", _timm("vit_tiny_patch16_224"), dynamo=True),
        RealModel("deit_tiny", "vit", _timm("deit_tiny_distilled_patch16_224")),
        RealModel("unet", "segmentation", _unet),
        RealModel("bert", "language", _bert, dynamo=True, vocab=30522),
        RealModel("gpt2", "language", _gpt2, dynamo=True, vocab=50257),
        RealModel("llama", "language", _llama, dynamo=True, vocab=32000),
        RealModel("whisper_encoder", "audio", _whisper_encoder),
        RealModel("lstm", "rnn", _recurrent(nn.LSTM), dynamo=True),
        RealModel("gru", "rnn", _recurrent(nn.GRU)),
    ]
}


# ---- export, benchmark, report ------------------------------------------------------


def export_onnx(spec: RealModel, exporter: str, cache: Path) -> tuple[onnx.ModelProto, dict]:
    """``spec`` exported by ``exporter`` to ``cache/<name>.<exporter>.onnx`` (kept, and
    reused while it is there: delete it after changing torch, timm or transformers).

    The model returned carries the range of its token ids in its metadata, which is where
    bench.models.sample_inputs (and so bench_model) reads it. Also returns facts for the
    JSON: exporter, file, whether it was cached, export seconds, opset, input shapes.
    """
    path = cache / f"{spec.name}.{exporter}.onnx"
    info: dict[str, Any] = {"exporter": exporter, "onnx": str(path), "cached": path.exists()}
    if not path.exists():
        torch.manual_seed(0)
        module, inputs = spec.build()
        cache.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.onnx")  # a failed export leaves no cache entry
        start = time.perf_counter()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation, ...
            torch.onnx.export(
                module.eval(),
                tuple(inputs.values()),
                partial,
                input_names=list(inputs),
                dynamo=exporter == "dynamo",
                external_data=False,
                verbose=False,
            )
        partial.replace(path)
        info["export_s"] = time.perf_counter() - start
    model = onnx.load(path)
    if spec.vocab:
        onnx.helper.set_model_props(model, {INT_RANGE_KEY + "input_ids": str(spec.vocab)})
    info["opset"] = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    info["inputs"] = {
        i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input
    }
    return model, info


def bench_real(
    spec: RealModel, exporter: str, args: argparse.Namespace, workdir: Path
) -> ModelResult:
    """Export, then bench/model_bench.py's ``bench_model`` on the exported model.

    ``bench_model`` builds its model as ``MODELS[name]()``; the exported one is put there
    for the call only. Any failure lands in the result, so the run goes on.
    """
    try:
        model, info = export_onnx(spec, exporter, args.cache)
    except Exception as exc:
        result = ModelResult(spec.name, {"exporter": exporter})
        result.error, result.traceback = describe_failure(f"{exporter} export", exc)
        return result
    key = f"{spec.name}.{exporter}"  # also the artifact's file name
    with mock.patch.dict(MODELS, {key: lambda: model}):
        result = bench_model(
            key, {}, workdir, repeat=args.repeat, warmup=args.warmup, threads=args.threads
        )
    result.name, result.config = spec.name, info
    return result


def results_table(results: list[ModelResult], threads: int) -> str:
    header = ["model", "exporter", "compile s", "tensorsmith ms", "ORT ms", "ratio"]
    header += ["max rel error", "note"]
    rows = [
        [
            r.name,
            r.config["exporter"],
            _num(r.compile_s, ".1f"),
            _ms(r.tensorsmith),
            _ms(r.onnxruntime),
            _num(r.ratio, ".2f"),
            _num(r.max_rel_error, ".1e"),
            _note(r.error, r.max_rel_error),
        ]
        for r in results
    ]
    runs = max((r.onnxruntime.runs for r in results if r.onnxruntime), default=0)
    title = (
        f"Real models: {threads} threads, batch 1, median (min) of {runs} runs, "
        "ratio = ORT / tensorsmith (> 1: tensorsmith faster)"
    )
    return title + "\n" + format_table(header, rows, notes=True)


def summary(results: list[ModelResult]) -> dict[str, Any]:
    """Geometric mean and minimum of the ratios, over the rows that have one."""
    timed = [r for r in results if r.ratio is not None]
    if not timed:
        return {"rows": len(results), "timed": 0}
    worst = min(timed, key=lambda r: r.ratio or 0.0)
    return {
        "rows": len(results),
        "timed": len(timed),
        "geomean_ratio": math.exp(sum(math.log(r.ratio or 1.0) for r in timed) / len(timed)),
        "min_ratio": worst.ratio,
        "min_ratio_row": f"{worst.name} [{worst.config['exporter']}]",
    }


def _versions() -> dict[str, str]:
    found = {}
    for name in ("torch", "timm", "transformers", "onnxscript"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--models", default=",".join(ZOO), help="comma-separated (default: all)")
    p.add_argument(
        "--exporter",
        choices=[*EXPORTERS, "both"],
        help="default: torchscript for every model, and dynamo as well for those --list marks",
    )
    p.add_argument("--repeat", type=int, default=30, help="timed runs each (default: %(default)s)")
    p.add_argument(
        "--warmup", type=int, default=5, help="untimed runs first (default: %(default)s)"
    )
    p.add_argument("--threads", type=int, default=2, help="threads for both (default: %(default)s)")
    p.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="ONNX files (default: %(default)s)"
    )
    p.add_argument("--list", action="store_true", help="list the models and exit")
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in ZOO]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(ZOO)}")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def exporters_for(spec: RealModel, choice: str | None) -> tuple[str, ...]:
    if choice == "both" or (choice is None and spec.dynamo):
        return EXPORTERS
    return (choice or "torchscript",)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        rows = [[s.name, s.kind, " + ".join(exporters_for(s, None)), s.about] for s in ZOO.values()]
        print(format_table(["model", "kind", "default exporters", "what it is"], rows, notes=True))
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: never reach for the hub
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    logging.getLogger("onnxscript").setLevel(logging.ERROR)  # its constant folder's misses
    _import_torchvision()
    torch.set_num_threads(args.threads)
    payload: dict[str, Any] = {
        "environment": {**environment(args.threads), "export_versions": _versions()},
        "args": dict(vars(args), cache=str(args.cache)),
    }
    results = []
    with tempfile.TemporaryDirectory(prefix="tsm-real-") as tmp:
        for name in args.models:
            for exporter in exporters_for(ZOO[name], args.exporter):
                print(f"  {name} [{exporter}] ...", file=sys.stderr, flush=True)
                results.append(bench_real(ZOO[name], exporter, args, Path(tmp)))
    payload["models"] = [r.as_dict() for r in results]
    payload["summary"] = totals = summary(results)
    print(results_table(results, args.threads))
    if totals["timed"]:
        print(
            f"\nratio over the {totals['timed']} of {totals['rows']} rows timed: geometric mean "
            f"{totals['geomean_ratio']:.2f}, minimum {totals['min_ratio']:.2f} "
            f"({totals['min_ratio_row']})"
        )
    start_load, end_load = payload["environment"]["load_average"], load_average()
    payload["load_average_at_end"] = end_load
    if start_load and end_load:
        print(
            f"load average (1 min) at start {start_load[0]:.2f}, at end {end_load[0]:.2f}, "
            f"on {os.cpu_count()} CPUs (other load on the machine skews the times)"
        )
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"real_{dt.datetime.now():%Y-%m-%d_%H%M%S}.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
