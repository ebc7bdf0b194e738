"""The kernels' launches on the CPU: each kernel's parameters as its compiled PTX declares them."""
import pytest

jit = pytest.importorskip("mxfp4.cuda.jit")


def test_entry_params_are_the_ptx_prototypes_and_the_compile_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path))
    found = jit.entry_params("quantize.cu")
    # mxfp4_quantize(const u16 *A, int lda, u8 *codes, u8 *scales, int M, int K)
    assert found["mxfp4_quantize"] == (".u64", ".u32", ".u64", ".u64", ".u32", ".u32")
    assert set(found) == {"mxfp4_quantize", "mxfp4_quantize_tokens"}
    cached, = tmp_path.iterdir()  # the compile's cubin, which compile_cubin now reads
    assert jit.compile_cubin("quantize.cu") == cached.read_bytes() and cached.read_bytes()[:4] == b"\x7fELF"
    # a tensor map by value (const __grid_constant__ TensorMap wmap, gemm_wgmma.cu)
    assert jit.entry_params("gemm_wgmma.cu", dict(TN=64, STAGES=3))["mxfp4_gemm_cv"][3] == ".align 64 .b8 [128]"
