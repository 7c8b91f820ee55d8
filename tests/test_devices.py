"""What a device-agnostic PyTorch program asks before it trains, answered as a CPU-only PyTorch
answers: device objects, torch.cuda, torch.backends, torch.accelerator, torch.amp (autocast and
GradScaler where they do nothing), the determinism switch and print options."""

import warnings

import pytest

from oracle_helpers import same_error, same_on_both


@pytest.mark.parametrize(
    "spec", [("cpu",), ("cuda",), ("cuda:1",), ("cuda", 2), ("cpu", 0), ("meta",), ("mps:0",), ("cpu:0",)]
)
def test_device_objects(fg, torch, spec):
    def program(lib):
        d = lib.device(*spec)
        return repr(d), str(d), d.type, d.index, d == lib.device(*spec), d == lib.device("cuda"), d == str(d)

    same_on_both(fg, torch, program)
    assert hash(fg.device(*spec)) == hash(fg.device(*spec))


@pytest.mark.parametrize(
    "spec",
    [("CUDA",), ("gpu",), ("cuda:x",), ("cuda:-1",), ("cuda:01",), ("cuda:0:1",), ("cuda", -1), ("cuda:1", 2)],
)
def test_bad_device_strings(fg, torch, spec):
    same_error(fg, torch, lambda lib: lib.device(*spec))


@pytest.mark.parametrize(
    "program",
    [
        lambda lib: lib.zeros(2, device="cuda"),
        lambda lib: lib.tensor([1.0], device=lib.device("cuda", 0)),
        lambda lib: lib.zeros(2).cuda(),
        lambda lib: lib.zeros(2).to("cuda"),
        lambda lib: lib.zeros(2).to(device="cuda:0", dtype=lib.float64),
        lambda lib: lib.zeros(2).new_zeros(2, device="cuda"),
        lambda lib: lib.zeros(2, device="xpu"),
        lambda lib: lib.zeros(2).to("mps"),
        lambda lib: lib.nn.Linear(2, 2).cuda(),
        lambda lib: lib.nn.Linear(2, 2).to("cuda"),
        lambda lib: lib.cuda.synchronize(),
        lambda lib: lib.cuda.current_device(),
        lambda lib: lib.cuda.get_device_name(),
    ],
)
def test_tensors_stay_on_the_cpu(fg, torch, program):
    same_error(fg, torch, program)


def test_cuda_backends_and_accelerator_queries(fg, torch):
    def program(lib):
        cuda, backends = lib.cuda, lib.backends
        cuda.manual_seed(1), cuda.manual_seed_all(1), cuda.empty_cache()
        return (
            cuda.is_available(),
            cuda.device_count(),
            cuda.is_initialized(),
            cuda.is_bf16_supported(),
            cuda.memory_allocated(),
            backends.cuda.matmul.allow_tf32,
            backends.cuda.is_built(),
            [backends.cudnn.enabled, backends.cudnn.benchmark, backends.cudnn.deterministic],
            [backends.cudnn.allow_tf32, backends.cudnn.is_available(), backends.cudnn.version()],
            [backends.mps.is_available(), backends.mps.is_built()],
            [lib.accelerator.is_available(), lib.accelerator.device_count(), lib.accelerator.current_accelerator()],
        )

    same_on_both(fg, torch, program)


def test_backend_switches_keep_what_is_set(fg):
    before = fg.backends.cudnn.benchmark, fg.backends.cuda.matmul.allow_tf32
    try:
        fg.backends.cudnn.benchmark = True
        fg.backends.cuda.matmul.allow_tf32 = True
        assert (fg.backends.cudnn.benchmark, fg.backends.cuda.matmul.allow_tf32) == (True, True)
    finally:
        fg.backends.cudnn.benchmark, fg.backends.cuda.matmul.allow_tf32 = before


def warnings_of(action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = action()
    return result, [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.amp.GradScaler(),
        lambda lib: lib.amp.GradScaler("cuda", enabled=False),
        lambda lib: lib.cuda.amp.GradScaler(enabled=False),
        lambda lib: lib.cuda.amp.GradScaler(),
    ],
)
def test_grad_scaler_passes_through_without_cuda(fg, torch, make):
    """nanoGPT's float32 path: scaler.scale(loss).backward(); scaler.step(opt); scaler.update()."""

    def program(lib):
        scaler, said = warnings_of(lambda: make(lib))
        w = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
        opt = lib.optim.SGD([w], lr=0.1)
        loss = (w * w).sum()
        scaled = scaler.scale(loss)
        scaled.backward()
        scaler.unscale_(opt)
        stepped = scaler.step(opt)
        scaler.update()
        facts = [scaler.is_enabled(), scaler.get_scale(), scaler.state_dict(), scaled is loss, stepped]
        return said, facts, w.tolist(), scaler.scale([loss, loss]) == [loss, loss]

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.autocast(device_type="cuda", dtype=lib.float32),
        lambda lib: lib.amp.autocast("cuda"),
        lambda lib: lib.autocast("cpu", enabled=False),
        lambda lib: lib.autocast("cpu", dtype=lib.float32),
        lambda lib: lib.cuda.amp.autocast(),
    ],
)
def test_autocast_where_it_does_nothing(fg, torch, make):
    def program(lib):
        context, said = warnings_of(lambda: make(lib))
        with context:
            y = lib.tensor([[1.0, 2.0]]) @ lib.tensor([[3.0], [4.0]])

        @make(lib)
        def decorated(x):
            return x * 2

        return said, y.tolist(), y.dtype is lib.float32, decorated(lib.tensor(1.5)).item()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the decorator's own construction warns again
        same_on_both(fg, torch, program)


def test_cpu_autocast_to_half_types_is_named_as_missing(fg):
    with pytest.raises(NotImplementedError, match="torch.autocast on the CPU .* is not provided by fastgrad"):
        fg.autocast("cpu")
    same_error(fg, pytest.importorskip("torch"), lambda lib: lib.autocast("tpu"))


def test_deterministic_algorithms_switch(fg, torch):
    def program(lib):
        try:
            lib.use_deterministic_algorithms(True, warn_only=True)
            on = lib.are_deterministic_algorithms_enabled(), lib.is_deterministic_algorithms_warn_only_enabled()
        finally:
            lib.use_deterministic_algorithms(False)
        return on, lib.are_deterministic_algorithms_enabled(), lib.is_deterministic_algorithms_warn_only_enabled()

    same_on_both(fg, torch, program)
    same_error(fg, torch, lambda lib: lib.use_deterministic_algorithms(1))
    same_error(fg, torch, lambda lib: lib.use_deterministic_algorithms(True, warn_only=1))


@pytest.mark.parametrize(
    "options",
    [
        [dict(precision=2)],
        [dict(threshold=5), dict(edgeitems=1)],
        [dict(sci_mode=True)],
        [dict(sci_mode=False)],
        [dict(profile="short")],
        [dict(profile="full", linewidth=20)],
        [dict(precision=1), dict(profile="nonsense")],
    ],
)
def test_set_printoptions(fg, torch, options):
    def program(lib):
        try:
            for kwargs in options:
                lib.set_printoptions(**kwargs)
            values = [
                lib.tensor([1.23456, 2.0]),
                lib.arange(12.0).reshape(2, 6),
                lib.tensor([1e-5, 1.0]),
                lib.tensor(3.14159),
            ]
            return [repr(v).replace("fastgrad", "torch") for v in values] + [repr(lib.arange(2000))]
        finally:
            lib.set_printoptions(profile="default")

    same_on_both(fg, torch, program)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_finfo(fg, torch, name):
    def program(lib):
        info = getattr(lib, "finfo")(getattr(lib, name))
        facts = [info.bits, info.eps, info.max, info.min, info.tiny, info.smallest_normal, info.resolution]
        return facts + [info.dtype, repr(info), info == lib.finfo(getattr(lib, name)), repr(lib.finfo())]

    same_on_both(fg, torch, program)


def test_iinfo_and_dtype_rules(fg, torch):
    def program(lib):
        info = lib.iinfo(lib.int64)
        dtypes = [lib.bool, lib.int64, lib.float32, lib.float64]
        promoted = [str(lib.promote_types(a, b)).split(".")[-1] for a in dtypes for b in dtypes]
        casts = [lib.can_cast(a, b) for a in dtypes for b in dtypes]
        return (
            [info.bits, info.min, info.max, info.dtype, repr(info)],
            promoted,
            casts,
            lib.get_default_dtype() is lib.float32,
        )

    same_on_both(fg, torch, program)


@pytest.mark.parametrize(
    "program",
    [
        lambda lib: lib.finfo(lib.int64),
        lambda lib: lib.iinfo(lib.bool),
        lambda lib: lib.iinfo(lib.float32),
        lambda lib: lib.promote_types(1, lib.float32),
        lambda lib: lib.can_cast(lib.float32, "float64"),
    ],
)
def test_dtype_facts_refuse_what_pytorch_refuses(fg, torch, program):
    same_error(fg, torch, program)
