# The files samebits' Python tools write (samebits.torch.trace, calibrate, find_nondeterminism's
# trace_dir) follow the command-line program's rule for output files: a bad path is refused before
# any work, a link stays a link, a replaced file keeps its permissions, and nothing of the user's
# is replaced or created where it should not be.
import itertools
import os
import pathlib
import stat

import pytest
import torch

import samebits
import samebits.torch as st

RECORDERS = ["python"] + (["cpp"] if st.mode.uses_cpp_kernels() else [])


def work(counter):
    def fn():
        counter.append(1)
        return torch.arange(4.0) * 2
    return fn


def tracing_with(recorder):
    def run(path, counter):
        with st.trace(path, recorder=recorder):
            work(counter)()
    return run


def run_calibrate(path, counter):
    st.calibrate(work(counter), runs=2, path=path)


WRITERS = {f"trace-{r}": tracing_with(r) for r in RECORDERS}
WRITERS["calibrate"] = run_calibrate


def bad_path(tmp_path, kind):
    if kind == "empty":
        return ""
    if kind == "directory":
        (tmp_path / "adir").mkdir()
        return str(tmp_path / "adir")
    if kind == "missing folder":
        return str(tmp_path / "no" / "such" / "out.json")
    if kind == "not a regular file":
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        return str(fifo)
    raise AssertionError(kind)


KINDS = ["empty", "directory", "missing folder", "not a regular file"]


@pytest.mark.parametrize("writer,kind", list(itertools.product(sorted(WRITERS), KINDS)))
def test_a_bad_output_path_is_refused_before_any_work(tmp_path, writer, kind):
    path = bad_path(tmp_path, kind)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    counter = []
    with pytest.raises(samebits.InvalidArgument):
        WRITERS[writer](path, counter)
    assert counter == [], "the work ran before the path was refused"
    assert sorted(p.name for p in tmp_path.rglob("*")) == before, "a file or folder was made"


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_path_of_another_type_is_a_type_error(writer):
    with pytest.raises(TypeError, match="path"):
        WRITERS[writer](3, [])


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_link_stays_a_link_and_a_replaced_file_keeps_its_permissions(tmp_path, writer):
    real = tmp_path / "real.out"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.out"
    link.symlink_to(real.name)
    counter = []
    WRITERS[writer](pathlib.Path(link), counter)
    assert counter and link.is_symlink() and os.readlink(link) == real.name
    assert real.read_text() != "old"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert not list(tmp_path.glob("*.partial"))


def test_trace_arguments_of_the_wrong_type_are_refused(tmp_path):
    for recorder in RECORDERS:
        with pytest.raises(TypeError, match="stats"):
            st.trace(str(tmp_path / "t"), stats="no", recorder=recorder)
        with pytest.raises(TypeError, match="context"):
            st.trace(str(tmp_path / "t"), context=5, recorder=recorder)


def test_the_finder_never_replaces_traces_in_its_folder(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "run2.trace").write_text("my notes")
    counter = []
    with pytest.raises(samebits.InvalidArgument, match="run2.trace"):
        st.find_nondeterminism(work(counter), runs=2, trace_dir=str(mine))
    assert counter == [] and (mine / "run2.trace").read_text() == "my notes"
    with pytest.raises(samebits.InvalidArgument, match="does not exist"):
        st.find_nondeterminism(work(counter), trace_dir=str(tmp_path / "no" / "folder"))
    assert not (tmp_path / "no").exists()
    # a new folder under an existing one is made and filled
    report = st.find_nondeterminism(work(counter), trace_dir=str(tmp_path / "new"))
    assert report.deterministic and (tmp_path / "new" / "run2.trace").exists()


@pytest.mark.parametrize("fn,runs,deterministic,error", [
    (None, 2, None, TypeError), ("train", 2, None, TypeError), (torch.zeros, "3", None, TypeError),
    (torch.zeros, 2.0, None, TypeError), (torch.zeros, 2, "yes", TypeError),
    (torch.zeros, 1, None, ValueError)])
def test_the_finder_refuses_bad_arguments_before_running(fn, runs, deterministic, error):
    with pytest.raises(error):
        st.find_nondeterminism(fn, runs=runs, deterministic=deterministic)


def test_fresh_processes_refuse_a_function_they_cannot_import():
    counter = []
    with pytest.raises(ValueError, match="module-level function"):
        st.find_nondeterminism(lambda: work(counter)(), fresh_process=True)
    assert counter == []


@pytest.mark.parametrize("fn,kwargs,error", [
    (None, {}, TypeError), (torch.zeros, {"runs": "5"}, TypeError),
    (torch.zeros, {"runs": 2.5}, TypeError), (torch.zeros, {"safety_factor": "4"}, TypeError),
    (torch.zeros, {"rel_floor": None}, TypeError), (torch.zeros, {"rel_floor": -1.0}, ValueError),
    (torch.zeros, {"safety_factor": 0.5}, ValueError)])
def test_calibrate_refuses_bad_arguments_before_running(fn, kwargs, error):
    counter = []
    with pytest.raises(error):
        st.calibrate(work(counter) if fn is torch.zeros else fn, **kwargs)
    assert counter == []
