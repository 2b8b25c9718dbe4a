from tests.fixtures.procs import no_process_left_behind

__all__ = ["no_process_left_behind"]  # an autouse fixture: every test here is checked
