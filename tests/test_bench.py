"""The benchmark and the command line on the CPU reference path."""
import pytest

from mxfp4 import cli
from mxfp4.bench import harness
from mxfp4.bench.shapes import parse_shapes


def test_cpu_bench_says_which_path_and_is_exact(tmp_path):
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine benchmarks the GPU path")
    lines = []
    text = harness.run(parse_shapes(["4,64,128"]), tmp_path / "r.csv", progress=lines.append)
    assert "CPU reference path" in lines[0]
    assert "| 4x64x128 |" in text and "100.0000%" in text
    assert "| roofline us | x roofline |" in text
    assert (tmp_path / "r.csv").read_text().count("\n") == 2


def test_cli_bench_data_all_runs_each_data_set(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine benchmarks the GPU path")
    assert cli.main(["bench", "--shapes", "4,64,128", "--data", "all"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 4x64x128 |")]
    assert [row.split(" | ")[1] for row in rows] == ["randn", "model", "heavy"]
    assert all("| 100.0000% | 0 |" in row for row in rows)


def test_roofline_is_the_int8_compute_term_or_the_stream_floor():
    from mxfp4.bench.shapes import make_shape

    assert harness.INT8_PEAK == 1934e12
    big = make_shape(4096, 7168, 7168)
    compute_us = 2 * 4096 * 7168 * 7168 / 1934e12 * 1e6  # 217.6 us
    assert harness.roofline_us(big, 20.0) == pytest.approx(compute_us) == harness.roofline_us(big)
    small = make_shape(16, 2112, 7168)
    assert harness.roofline_us(small, 9.5) == 9.5 and harness.roofline_us(small) < 1


def test_record_keeps_an_older_csv_under_its_columns(tmp_path):
    """A CSV an older bench wrote (fewer columns) is rewritten once under the union: old rows stay under their names."""
    import csv

    record = tmp_path / "r.csv"
    record.write_text("date,device,commit,shape,mxfp4_us,old_only\n2026-12-01,H200,abc,4x64x128,9.5,x\n")
    harness.append_rows(record, [{"date": "d", "device": "cpu", "commit": "c", "shape": "1x16x64", "mxfp4_us": 1.0,
                                  "roofline_us": 0.5}])
    harness.append_rows(record, [{"date": "d", "device": "cpu", "commit": "c", "shape": "2x16x64", "mxfp4_us": 2.0}])
    with record.open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["shape"], r["mxfp4_us"], r["roofline_us"], r["old_only"]) for r in rows] == [
        ("4x64x128", "9.5", "", "x"), ("1x16x64", "1.0", "0.5", ""), ("2x16x64", "2.0", "", "")]
    assert record.read_text().count("date,") == 1


def test_cli_errors_are_clean(capsys):
    assert cli.main(["bench", "--shapes", "4,64,100"]) == 2
    assert "multiple of 64" in capsys.readouterr().err


def test_bench_model_tiny_on_cpu(tmp_path):
    """The model benchmark end to end at the test size: eager and torch.compile(fullgraph=True) generate the
    same tokens, every MXFP4 layer output is within the stated bound of the float64 oracle."""
    import csv

    from mxfp4.bench import llama, model

    record = tmp_path / "model.csv"
    text = model.run(llama.TINY, 2, 4, 3, "cpu", record, ("eager", "compile"), progress=lambda s: None)
    with open(record) as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["mode"]) for r in rows] == [("bf16", "eager"), ("mxfp4", "eager"), ("mxfp4", "compile")]
    assert all(r["tokens_equal_eager"] == "True" for r in rows)
    assert int(rows[1]["weight_bytes"]) < int(rows[0]["weight_bytes"]) / 2
    assert ", 0 outside the stated bound, 0 NaN/Inf mismatches" in text


def test_bench_model_moe_tiny_on_cpu(tmp_path):
    """--moe at the test size: the experts become one MXFP4Experts a layer (grouped_mm summation), the routers
    stay bf16, eager generation runs; the bf16 experts' grouped_mm forward equals a per-pair loop."""
    import csv

    import torch

    from mxfp4 import quantize_
    from mxfp4.bench import llama, model
    from mxfp4.moe import Accumulation, MXFP4Experts

    record = tmp_path / "moe.csv"
    text = model.run(llama.TINY_MOE, 2, 4, 3, "cpu", record, ("eager",), progress=lambda s: None)
    with open(record) as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["mode"]) for r in rows] == [("bf16", "eager"), ("mxfp4", "eager")]
    assert int(rows[1]["weight_bytes"]) < int(rows[0]["weight_bytes"]) * 0.6  # the bf16 embeddings stay
    assert "mixture-of-experts decoder (hidden 128, 2 layers, 8 experts of 64 (top 2)" in text

    m = llama.build(llama.TINY_MOE, 1, "cpu")
    experts = m.layers[0].mlp.experts
    torch.manual_seed(0)
    x = torch.randn(5, 128, dtype=torch.bfloat16)
    idx = torch.stack([torch.randperm(8)[:2] for _ in range(5)])
    w = torch.rand(5, 2).to(torch.bfloat16)
    want = torch.zeros(5, 128, dtype=torch.float32)
    for t in range(5):
        for j in range(2):
            e = int(idx[t, j])
            g, u = (x[t:t + 1] @ experts.gate_up_proj[e].t()).chunk(2, dim=-1)
            y = (torch.nn.functional.silu(g) * u) @ experts.down_proj[e].t()
            want[t] += (y * w[t, j]).float()[0]
    assert torch.equal(experts(x, idx, w), want.to(torch.bfloat16))

    quantize_(m, model._quantized)
    layer = m.layers[0].mlp
    assert isinstance(layer.experts, MXFP4Experts) and layer.experts.accumulation is Accumulation.SUM
    assert type(layer.gate) is torch.nn.Linear and layer.gate.weight.dtype is torch.bfloat16


def test_bench_model_from_a_checkpoint_on_cpu(tmp_path, capsys):
    """--make-checkpoint then --checkpoint: the model built on meta, loaded, byte-identical to the in-memory one."""
    pytest.importorskip("safetensors")
    assert cli.main(["bench-model", "--tiny", "--device", "cpu", "--make-checkpoint", str(tmp_path / "ck")]) == 0
    assert cli.main(["bench-model", "--tiny", "--device", "cpu", "--checkpoint", str(tmp_path / "ck"), "--batch", "2",
                     "--prompt", "4", "--new-tokens", "3", "--modes", "eager"]) == 0
    out = capsys.readouterr().out
    assert "| mxfp4 | eager |" in out and "| bf16 |" not in out
    assert "model built on meta and loaded onto cpu" in out
    assert "state_dict byte-identical to the in-memory quantized model's: True" in out
    assert ", 0 outside the stated bound, 0 NaN/Inf mismatches" in out


@pytest.mark.parametrize("argv, message", [
    (["fuzz", "--cases", "0"], "--cases must be at least 1, got 0"),
    (["fuzz", "--cases", "-5"], "--cases must be at least 1, got -5"),
    (["fuzz", "--cases", "3", "--jobs", "0"], "--jobs must be at least 1, got 0"),
    (["fuzz", "--cases", "3", "--large-m", "--grouped"], "--large-m and --grouped draw different cases: give one"),
    (["bench", "--shapes"], "--shapes needs at least one m,n,k shape"),
    (["bench", "--shapes", "4,64,128", "--plot", "out.svg"], "--plot must name a .png file"),
    (["bench-model", "--tiny", "--device", "nosuch"], "--device must be cpu, cuda or cuda:N, got 'nosuch'"),
    (["bench-model", "--tiny", "--batch", "0"], "--batch must be at least 1, got 0"),
    (["bench-model", "--tiny", "--new-tokens", "0"], "--new-tokens must be at least 1, got 0"),
    (["bench-model", "--tiny", "--moe", "--modes", "compile"], "--moe --modes compile: the MXFP4 experts' grouped"),
    (["bench-model", "--tiny", "--moe", "--checkpoint", "ck"], "--moe goes without --make-checkpoint / --checkpoint"),
])
def test_cli_refuses_nonsense_with_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_refuses_a_cuda_device_this_machine_lacks(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert cli.main(["bench-model", "--tiny", "--device", "cuda"]) == 2
    assert "this machine has no CUDA device" in capsys.readouterr().err


def test_cli_version_and_helps(capsys):
    from mxfp4 import __version__

    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"mxfp4 {__version__}"
    for command, says in (("bench", "(default: bench)"), ("fuzz", "(default 2000)"), ("bench-model", "(default: 128)"),
                          ("tune", "Hopper GPU only"), ("compile", "no GPU needed"), ("check", "exact oracle"),
                          ("info", "backend")):
        with pytest.raises(SystemExit) as e:
            cli.main([command, "--help"])
        assert e.value.code == 0
        assert says in " ".join(capsys.readouterr().out.split()), command
    with pytest.raises(SystemExit) as e:
        cli.main(["fuzz", "--backend", "triton"])
    assert e.value.code == 2


def test_bench_plot_writes_a_png(tmp_path, capsys):
    import torch

    pytest.importorskip("matplotlib")
    if torch.cuda.is_available():
        pytest.skip("this machine benchmarks the GPU path")
    png = tmp_path / "bench.png"
    assert cli.main(["bench", "--shapes", "4,64,128", "--record", str(tmp_path / "b.csv"), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from mxfp4.bench import plot

    rows = [{"shape": "4x2880x512", "mxfp4_us": 9.1, "cublas_bf16_us": 5.2},
            {"shape": "16x2112x7168", "mxfp4_us": 22.0, "cublas_bf16_us": 18.0, "floor_us": 10.1}]
    assert plot.write(rows, tmp_path / "gpu.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="no benchmark rows"):
        plot.write([], tmp_path / "none.png")


def test_moe_bench_routing_and_its_gpu_guard(capsys):
    import torch

    from mxfp4.bench import moe

    counts = moe.routing(16, 256, 8, seed=16)
    assert counts.shape == (256,) and int(counts.sum()) == 128 and int(counts.max()) <= 16
    assert torch.equal(counts, moe.routing(16, 256, 8, seed=16))
    if not torch.cuda.is_available():
        assert moe.main([]) == 2 and moe.main(["--data", "all"]) == 2
        assert "needs a Hopper GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        moe.main(["--data", "uniform"])
    g = torch.Generator().manual_seed(0)
    found = {kind: moe.activations(kind, 40, 512, seed=3, g=g) for kind in ("randn", "model", "heavy")}
    assert all(a.shape == (40, 512) and a.dtype is torch.bfloat16 for a in found.values())
    assert torch.equal(found["heavy"], moe.activations("heavy", 40, 512, seed=3, g=g))  # seeded: the bench's set
    assert found["heavy"].float().abs().max() > 20 * found["randn"].float().abs().max()  # its tail


def test_compile_note_is_printed_where_compiled_tokens_differ():
    from mxfp4.bench import llama, model

    row = {"model": "mxfp4", "mode": "compile", "tokens_per_s": 1.0, "ms_per_step": 1.0, "weight_bytes": 0,
           "peak_bytes": 0, "tokens_equal_eager": False, "compile_s": 1.0}
    check = {"gemm_outputs": 1, "gemm_bitident": 1.0, "gemm_violations": 0, "gemm_nonfinite_mismatch": 0,
             "logits_bitident": 1.0, "logits_max_abs_diff": 0.0}
    assert model.COMPILE_NOTE in model.report(llama.TINY, [row], check, "cpu")
    assert model.COMPILE_NOTE not in model.report(llama.TINY, [{**row, "tokens_equal_eager": True}], check, "cpu")


@pytest.mark.parametrize("option", ["--record", "--out", "--plot"])
def test_bench_output_paths_are_checked_before_any_shape_runs(tmp_path, capsys, monkeypatch, option):
    from mxfp4 import cli
    from mxfp4.bench import harness

    monkeypatch.setattr(harness, "run", lambda *a, **k: pytest.fail("the benchmark ran"))
    (tmp_path / "file").write_text("")
    for value, message in ((str(tmp_path), "is a directory: it must name a file"),
                           (str(tmp_path / "file" / "x.png"), "is a file, so the file cannot be made under it")):
        assert cli.main(["bench", "--shapes", "1,16,64", option, value]) == 2
        assert message in capsys.readouterr().err


def _weight(n: int, k: int, seed: int = 0):
    """A plain MXFP4 weight [n, k] of random codes whose scales hold every e8m0 byte (0, 127, 254, 255: NaN)."""
    import torch

    from mxfp4.tensor import MXFP4Tensor

    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=g)
    scales = (torch.randperm(n * k // 32, generator=g) % 256).to(torch.uint8).reshape(n, k // 32)
    return MXFP4Tensor(codes, scales, (n, k))


def _decode_humming(weight, weight_scale):
    """humming's "mxfp4" schema decoded on its own terms: element 2j in byte j's low nibble, e8m0 scales read as
    torch.float8_e8m0fnu (humming views them so), one per 32 elements."""
    import torch

    lut = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                       dtype=torch.float64)
    nibbles = torch.stack([weight & 0xF, weight >> 4], dim=-1).reshape(weight.shape[0], -1).long()
    scale = weight_scale.view(torch.float8_e8m0fnu).double().repeat_interleave(32, dim=-1)
    return lut[nibbles] * scale


@pytest.mark.parametrize("n, k", [(256, 128), (48, 7168), (100, 96)])
def test_weights_convert_to_hummings_schema_exactly(n, k):
    """Our shuffled weight (aiter's layout, padded where N % 16 or K % 64) -> humming's mxfp4 schema: the same
    values (NaN blocks included), the plain bytes back, and shuffled again the same shuffled bytes."""
    import torch

    from mxfp4.bench.peers import humming_tensors
    from mxfp4.tensor import Layout, MXFP4Tensor, dequantize

    plain = _weight(n, k)
    shuffled = plain.to_layout(Layout.AITER_SHUFFLED)
    h = humming_tensors(shuffled)
    assert set(h) == {"weight", "weight_scale"}
    assert h["weight"].dtype == h["weight_scale"].dtype == torch.uint8
    assert h["weight"].shape == (n, k // 2) and h["weight_scale"].shape == (n, k // 32)
    assert h["weight"].is_contiguous() and h["weight_scale"].is_contiguous()
    ours, theirs = dequantize(shuffled, torch.float64), _decode_humming(h["weight"], h["weight_scale"])
    assert torch.isnan(ours).any() and torch.equal(torch.isnan(ours), torch.isnan(theirs))
    assert torch.equal(ours.nan_to_num(), theirs.nan_to_num())
    assert torch.equal(h["weight"], plain.data) and torch.equal(h["weight_scale"], plain.scales)
    back = MXFP4Tensor(h["weight"], h["weight_scale"], (n, k), Layout.PLAIN).to_layout(Layout.AITER_SHUFFLED)
    assert torch.equal(back.data, shuffled.data) and torch.equal(back.scales, shuffled.scales)


def test_peer_humming_without_the_package_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    import sys

    from mxfp4.bench import peers

    monkeypatch.setitem(sys.modules, "humming", None)  # not importable, whether or not it is installed
    monkeypatch.setattr(harness, "bench_gpu", lambda *a, **k: pytest.fail("the benchmark ran"))
    monkeypatch.setattr(harness, "bench_cpu", lambda *a, **k: pytest.fail("the benchmark ran"))
    with pytest.raises(ImportError, match=r"humming-kernels 0\.1\.19 .*pip install humming_kernels-0\.1\.19-"):
        harness.run(parse_shapes(["4,64,128"]), peer="humming")
    assert cli.main(["bench", "--shapes", "4,64,128", "--peer", "humming", "--record", str(tmp_path / "r.csv")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "mxfp4 bench: --peer humming needs the package humming-kernels 0.1.19" in err
    assert f"pip install {peers.HUMMING_WHEEL}" in err
    assert not (tmp_path / "r.csv").exists()
    with pytest.raises(ValueError, match="unknown peer 'marlin'"):
        peers.load("marlin")


def test_humming_driver_builds_one_layer_a_mode_on_our_weights(monkeypatch):
    """The driver against a stand-in for humming's API (the GPU runs the real one): each mode's layer gets the
    converted tensors and its input config, the tuning config for the benchmarked M reaches every call, and N
    is padded to 128 only where humming's heuristics find no tile (bf16 A at N % 128 != 0)."""
    import json

    import torch

    from mxfp4.bench import peers
    from mxfp4.tensor import Layout

    built = []

    class Layer:
        def __init__(self, **kw):
            self.kw, self.humming_config = kw, (kw["input_config"]["dtype"], kw["pad_n_to_multiple"])
            built.append(self)

        def to(self, device):
            return self

        def load_from_tensors(self, tensors):
            self.tensors = tensors

        def transform(self):
            pass

        def __call__(self, a, tuning_config):
            return self, a, json.loads(tuning_config)

    def heuristics(config, shape_m, device):
        dtype, pad = config
        assert not (dtype == "bfloat16" and pad == 1 and n % 128)  # as sm_90's build_sm90_seed_config asserts
        return {"block_m": shape_m, "pad": pad}

    driver = peers.Humming.__new__(peers.Humming)
    driver._layer, driver._heuristics = Layer, heuristics
    for n, pads in ((256, {"w4a8": 1, "w4a16": 1}), (2112, {"w4a8": 1, "w4a16": 128})):
        built.clear()
        w = _weight(n, 64).to_layout(Layout.AITER_SHUFFLED)
        calls = driver.calls(w, 16)
        assert set(calls) == {"w4a8", "w4a16"}
        for mode, call in calls.items():
            layer, a, tuning = call("A")
            assert a == "A" and tuning == {"block_m": 16, "pad": pads[mode]}
            assert layer.kw["pad_n_to_multiple"] == pads[mode] and layer.kw["shape_n"] == n
            assert layer.kw["weight_config"] == {"quant_method": "mxfp4"} and layer.kw["torch_dtype"] is torch.bfloat16
            assert layer.kw["input_config"] == {"quant_method": "humming", **peers.HUMMING_MODES[mode]}
            assert torch.equal(layer.tensors["weight"], peers.humming_tensors(w)["weight"])
        assert len(built) == 2 + (n % 128 != 0)


def test_gpu_table_adds_the_humming_columns_only_with_the_peer():
    row = {"shape": "16x2112x7168", "data": "randn", "mxfp4_us": 20.0, "prepared_us": 19.0, "cublas_bf16_us": 18.0,
           "ratio": 1.11, "floor_us": 10.0, "x_floor": 2.0, "roofline_us": 10.0, "x_roofline": 2.0, "tflops": 24.2,
           "host_us": 80.0, "host_prepared_us": 90.0, "host_mm_us": 20.0, "kept_bytes": 8_000_000, "bitident": 1.0,
           "violations": 0}
    plain = harness.format_table([row], gpu=True)
    assert "| roofline us | x roofline |" in plain and "| 10.00 | 2.00 | 24.2 |" in plain
    assert "humming" not in plain
    peer = {**row, "humming_w4a8_us": 16.0, "humming_w4a16_us": 12.5, "x_humming_w4a8": 1.25, "humming_w4a16_err": 6e-3}
    text = harness.format_table([peer], gpu=True)
    assert "| x roofline | humming W4A8 us | humming W4A16 us | ours / humming W4A8 | TFLOP/s |" in text
    assert "| 2.00 | 16.00 | 12.50 | 1.25 | 24.2 |" in text
    assert "| geomean | randn | 20.00 |" in text and "| 16.00 | 12.50 | 1.25 |" in text.splitlines()[3]
    assert "error up to 6.0e-03" in text
    head, sep = text.splitlines()[:2]
    assert head.count("|") == sep.count("|") == text.splitlines()[2].count("|") == text.splitlines()[3].count("|")


def _spread_fraction(a):
    """The fraction of (token, 256-element segment) pairs of ``a`` whose nonzero blocks' scale exponents span more
    than 3 binary orders (what a fold of a segment's blocks into one int32 sum cannot hold)."""
    from mxfp4 import formats, reference

    codes, scale_bytes = formats.quantize_codes(a.float())
    spread = reference._exponent_spread((codes & 7).reshape(-1, 8, 32), scale_bytes.long().reshape(-1, 8))
    return (spread > 3).float().mean().item()


def test_data_sets_are_as_harsh_as_their_docstring_says():
    """bench/data.py's sets spread A's block exponents as it states (a real Llama-architecture model's q/k/v
    inputs: 42% of the pairs): heavy-tailed about 40%, model-like about 29%, randn none; mean of three seeds."""
    from mxfp4.bench.data import task_data

    mean = {kind: sum(_spread_fraction(task_data(256, 64, 4096, seed, kind, "cpu")[0]) for seed in (1, 2, 3)) / 3
            for kind in ("randn", "model", "heavy")}
    assert mean["randn"] == 0.0
    assert 0.22 <= mean["model"] <= 0.38, mean
    assert 0.38 <= mean["heavy"] <= 0.48, mean
