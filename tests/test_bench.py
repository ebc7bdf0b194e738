"""The benchmark harness on the CPU: shape sets and parsing, providers, the report files, the CPU
reference path of ``mxfp4 bench``, geometric means, and the stream probe under the interpreter."""
import argparse
import csv
import dataclasses
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from mxfp4 import task
from mxfp4.bench import harness, providers, report, shapes
from mxfp4.bench.timing import geomean


def bench_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    harness.add_arguments(parser)
    return parser.parse_args(list(argv))


# --- shapes ---------------------------------------------------------------------------------

def test_bench_set_is_the_task_benchmark_with_its_seeds():
    got = [(s.m, s.n, s.k, s.seed) for s in shapes.shape_set("bench")]
    assert got == [tuple(x) for x in task.BENCHMARK_SHAPES]
    assert [(s.m, s.n, s.k, s.seed) for s in shapes.shape_set("test")] == [tuple(x) for x in task.TEST_SHAPES]


@pytest.mark.parametrize("name", sorted(shapes.SHAPE_SETS))
def test_every_set_is_valid_for_the_task_layouts(name):
    got = shapes.shape_set(name)
    assert got and len(set(got)) == len(got)
    for s in got:
        assert s.k % 64 == 0 and s.n % 16 == 0 and s.m >= 1


def test_model_sets_span_the_m_buckets():
    ds = shapes.shape_set("deepseek")
    assert {s.m for s in ds} == set(shapes.M_BUCKETS) and min(shapes.M_BUCKETS) == 1 and max(shapes.M_BUCKETS) == 8192
    assert {(s.n, s.k) for s in ds} >= {(2112, 7168), (3072, 1536), (4096, 512), (7168, 2048)}
    assert {(s.n, s.k) for s in shapes.shape_set("gptoss")} >= {(5120, 2880), (2880, 4096), (5760, 2880)}
    assert [(s.m, s.n, s.k) for s in shapes.shape_set("large")] == [(1024, 7168, 2048), (4096, 7168, 7168),
                                                                    (8192, 8192, 8192)]


def test_parse_shapes_forms_and_seeds():
    a, b, c = shapes.parse_shapes(["4,64,128", "16x2112x7168 8,64,128,99"])
    assert (a.m, a.n, a.k) == (4, 64, 128) and (b.m, b.n, b.k) == (16, 2112, 7168) and c.seed == 99
    assert a.seed == shapes.parse_shape("4,64,128").seed == shapes.derived_seed(4, 64, 128)
    assert a.seed != shapes.derived_seed(4, 64, 192)
    assert a.bytes_moved == 4 * 128 * 2 + 64 * 64 + 64 * 4 + 4 * 64 * 2 and a.flops == 2 * 4 * 64 * 128


@pytest.mark.parametrize("text", ["4,64", "4,64,100", "4,60,128", "a,b,c", "0,64,128", "4,64,128,1,2"])
def test_parse_shape_rejects(text):
    with pytest.raises(ValueError):
        shapes.parse_shape(text)


def test_unknown_names_raise():
    with pytest.raises(ValueError, match="unknown shape set"):
        shapes.shape_set("nope")
    with pytest.raises(ValueError, match="unknown provider"):
        providers.resolve_providers(["mxfp4,nope"])
    assert [p.name for p in providers.resolve_providers(["mxfp4,cublas_bf16", "mxfp4"])] == ["mxfp4", "cublas_bf16"]
    assert len(providers.resolve_providers(None)) == len(providers.PROVIDERS)


# --- providers on the CPU -------------------------------------------------------------------

def test_cpu_providers_say_why_they_are_unavailable():
    data = task.generate_input(4, 64, 128, 1, "cpu")
    cpu = torch.device("cpu")
    for p in providers.PROVIDERS.values():
        built = p.build(data, cpu)
        assert built.available == (not p.gpu_only), p.name
        assert built.note, p.name
    out = providers.PROVIDERS["mxfp4"].build(data, cpu).fn()
    assert out.shape == (4, 64) and out.dtype == torch.bfloat16


def test_fp8_rowwise_quantization_bounds():
    x = torch.randn(8, 64, dtype=torch.bfloat16) * 3
    q, scale = providers.fp8_rowwise(x)
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (8, 1) and scale.dtype == torch.float32
    back = q.float() * scale
    assert torch.all(q.float().abs().amax(dim=1) == providers.FP8_MAX)
    assert float(((back - x.float()).norm() / x.float().norm())) < 0.05


# --- geometric means ------------------------------------------------------------------------

def test_geomean():
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([2.0, 8.0, 4.0]) == pytest.approx(4.0)
    assert geomean([3.0, math.nan, 0.0, 12.0]) == pytest.approx(6.0)  # unmeasured values left out
    assert math.isnan(geomean([]))


def make_rows():
    rows = []
    for (m, n, k), bf16_us, ours_us in (((4, 64, 128), 10.0, 5.0), ((8, 64, 128), 40.0, 10.0)):
        rows.append(report.Row(m, n, k, 1, "custom", "mxfp4", us=ours_us, std_us=0.1, best_us=ours_us,
                                worst_us=ours_us, runs=10, speedup_vs_bf16=bf16_us / ours_us, pct_of_floor=50.0,
                                rel_err=1.7e-3, max_excess=0.5, identical_fraction=1.0, passes=True))
        rows.append(report.Row(m, n, k, 1, "custom", "cublas_bf16", us=bf16_us, speedup_vs_bf16=1.0))
        rows.append(report.Row(m, n, k, 1, "custom", "cublas_fp8", status="skipped", note="needs a CUDA GPU"))
    return rows


def test_summary_is_a_geomean_over_the_shapes():
    summary = {s["provider"]: s for s in report.summarize(make_rows())}
    assert summary["mxfp4"]["geomean_us"] == pytest.approx(math.sqrt(5.0 * 10.0))
    assert summary["mxfp4"]["geomean_speedup_vs_bf16"] == pytest.approx(math.sqrt(2.0 * 4.0))
    assert summary["mxfp4"]["all_pass"] is True and summary["mxfp4"]["shapes"] == 2
    assert summary["cublas_fp8"]["shapes"] == 0 and math.isnan(summary["cublas_fp8"]["geomean_us"])


def test_floor_and_derived_columns():
    shape = shapes.make_shape(64, 7168, 2048)
    ceil = harness.Ceilings(copy_bytes_per_s=4e12, bf16_flops=8e14, fp8_flops=1.4e15)
    assert ceil.rate == 1.4e15 and harness.Ceilings(4e12, 8e14).rate == 8e14
    floor = ceil.floor_us(shape)
    assert floor == pytest.approx(max(shape.bytes_moved / 4e12, shape.flops / 1.4e15) * 1e6)
    rows = [report.Row(64, 7168, 2048, 1, "x", name, us=us) for name, us in
            (("mxfp4", 20.0), ("cublas_bf16", 15.0), ("stream_floor", 5.0))]
    rows.append(report.Row(64, 7168, 2048, 1, "x", "cublas_fp8", status="skipped"))
    harness._finish_shape(rows, shape, ceil)
    mx = rows[0]
    assert mx.speedup_vs_bf16 == pytest.approx(0.75) and mx.pct_of_stream_floor == pytest.approx(25.0)
    assert mx.pct_of_floor == pytest.approx(floor / 20.0 * 100) and mx.tflops == pytest.approx(shape.flops / 20e6)
    assert mx.gbps == pytest.approx(shape.bytes_moved / 20e3) and math.isnan(rows[3].pct_of_floor)


# --- report files ---------------------------------------------------------------------------

def test_report_writes_csv_json_png(tmp_path):
    rows = make_rows()
    summary = report.summarize(rows)
    meta = report.metadata(torch.device("cpu"), None, shape_set=None, budget_s=1.0, timing=harness.CPU_LABEL)
    paths = report.write_results(rows, summary, meta, out_dir=tmp_path / "run", plot=True)
    with open(tmp_path / "run" / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == report.COLUMNS
    for col in ("us", "std_us", "best_us", "worst_us", "tflops", "gbps", "speedup_vs_bf16", "pct_of_floor",
                "pct_of_stream_floor", "rel_err", "max_excess", "passes"):
        assert col in report.COLUMNS
    assert len(table) == len(rows) and table[0]["provider"] == "mxfp4" and float(table[0]["us"]) == 5.0
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    for key in ("date_utc", "device", "torch", "triton", "mxfp4", "git_commit", "cuda", "ceilings", "timing_rule"):
        assert key in doc["metadata"]
    assert doc["columns"] == list(report.COLUMNS) and len(doc["rows"]) == len(rows)
    assert doc["rows"][2]["us"] is None  # NaN written as null: strict JSON
    assert {s["provider"] for s in doc["summary"]} == {"mxfp4", "cublas_bf16", "cublas_fp8"}
    png = tmp_path / "run" / "results.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not png.exists()
    else:
        assert png in paths and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = report.format_table(rows, summary)
    assert "skipped: needs a CUDA GPU" in text and "geometric means" in text


def test_default_out_dir_and_latest_copies(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = make_rows()
    paths = report.write_results(rows, report.summarize(rows), {"device": "x"}, plot=False)
    assert (tmp_path / "results" / "latest.csv").exists() and (tmp_path / "results" / "latest.json").exists()
    stamped = [p for p in paths if p.parent.name != "results"]
    assert stamped and all(p.parent.parent.name == "results" for p in stamped)


# --- the CPU reference path of `mxfp4 bench` -------------------------------------------------

def test_main_on_cpu_runs_the_reference_path(tmp_path, capsys):
    rc = harness.main(bench_args("--shapes", "4,64,128", "--out", str(tmp_path), "--no-plot", "--device", "cpu",
                                 "--no-progress"))
    text = capsys.readouterr().out
    assert rc == 0
    assert harness.CPU_LABEL in text and "GPU-only providers are skipped" in text
    doc = json.loads((tmp_path / "results.json").read_text())
    rows = {r["provider"]: r for r in doc["rows"]}
    assert set(rows) == set(providers.PROVIDERS)
    mx = rows["mxfp4"]
    assert mx["status"] == "ok" and mx["passes"] is True and mx["timing"] == harness.CPU_LABEL
    assert "reference" in mx["note"] and mx["us"] > 0 and mx["runs"] >= 1 and mx["rel_err"] < 4e-3
    assert mx["pct_of_floor"] is None  # no ceilings without a GPU
    for name in ("cublas_bf16", "cublas_fp8", "torch_emulation", "stream_floor", "cublas_fp8_gemm",
                 "cublas_int8_gemm"):
        assert rows[name]["status"] == "skipped" and rows[name]["note"]


def test_main_cpu_guard_skips_large_shapes(tmp_path, capsys):
    rc = harness.main(bench_args("--shapes", "4,64,128", "64,256,512", "--providers", "mxfp4", "--out",
                                 str(tmp_path), "--no-plot", "--device", "cpu", "--no-progress",
                                 "--cpu-max-gflop", "1e-3"))
    text = capsys.readouterr().out
    assert rc == 0 and "too large for the CPU" in text
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [r["status"] for r in doc["rows"]] == ["ok", "skipped"]


def test_main_rejects_bad_arguments(tmp_path, capsys):
    assert harness.main(bench_args("--shapes", "4,64,100", "--out", str(tmp_path))) == 2
    assert harness.main(bench_args("--providers", "nope", "--out", str(tmp_path))) == 2
    assert harness.main(bench_args("--flush-gib", "0", "--out", str(tmp_path))) == 2
    assert "mxfp4 bench:" in capsys.readouterr().err


def test_run_returns_rows_with_a_failed_provider_recorded():
    def broken(data, device, timer=None):
        raise RuntimeError("boom")

    bad = dataclasses.replace(providers.PROVIDERS["mxfp4"], name="broken", build=broken, exact=False)
    rows = harness.run(shapes.parse_shapes(["4,64,128"]), [providers.PROVIDERS["mxfp4"], bad], "cpu",
                       progress=False, cpu_runs=1)
    assert [r.status for r in rows] == ["ok", "failed"] and "boom" in rows[1].note


# --- the stream probe kernel under the Triton interpreter -----------------------------------

PROBE_SCRIPT = textwrap.dedent("""
    import torch
    from mxfp4 import task
    from mxfp4.bench.providers import stream_probe, stream_probe_torch
    for m, n, k, block in ((4, 64, 128, 256), (5, 48, 192, 64), (300, 64, 128, 1024)):
        data = task.generate_input(m, n, k, 7, "cpu")
        words = data[3].contiguous().view(torch.uint8).reshape(-1).view(torch.int32)
        scales = data[4].contiguous().view(torch.uint8).reshape(-1)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)  # poisoned: every element must be written
        stream_probe(words, scales, m, n, block=block, out=out)
        assert torch.equal(out, stream_probe_torch(words, scales, m, n, block=block)), (m, n, k, block)
    print("probe ok")
""")


def test_stream_probe_kernel_under_the_interpreter():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    try:
        done = subprocess.run([sys.executable, "-c", PROBE_SCRIPT], env=env, capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        pytest.skip("the Triton interpreter took over 60 s")
    assert done.returncode == 0 and "probe ok" in done.stdout, done.stderr[-3000:]
