"""runhelpers.fork_program: a program forked from the test process behaves as one started afresh."""
import gc
import os

from runhelpers import run_program


def test_the_parents_garbage_finalised_in_a_forked_program_closes_none_of_its_descriptors(tmp_path):
    """An object of the test process that still holds a descriptor (a file in a reference cycle, not yet collected)
    is finalised in the forked program when its collector runs. Its descriptor number must not be one the program
    has opened since: with the numbers closed at the fork, the program's new pipes took them and the collector closed
    one (a forked Snakemake's next job failed in Popen with EBADF)."""

    class Holder:
        pass

    gc.disable()  # the cycle is still garbage, uncollected, when the program forks
    try:
        held = Holder()
        held.cycle = held
        held.file = open(tmp_path / "held.txt", "w")
        number = held.file.fileno()
        del held

        def program():
            pipes = [os.pipe() for _ in range(48)]  # the lowest free numbers: the held one among them if it were free
            gc.collect()  # the test process's garbage finalised: its file closes the number it held
            for r, w in pipes:
                os.write(w, b"x")
                if os.read(r, 1) != b"x":
                    return 3
            return 0

        done = run_program(program, ["program"], cwd=tmp_path, timeout=60)
    finally:
        gc.enable()
        gc.collect()
    assert number < 3 + 2 * 48  # else the check proves nothing: no pipe could have taken the number
    assert done.returncode == 0, done.stderr[-2000:]
