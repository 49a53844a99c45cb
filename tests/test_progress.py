"""RunProgress: throttled progress lines with elapsed time and time left."""

from rla_jax.metrics.progress import RunProgress, format_duration


class _Clock:
  def __init__(self):
    self.t = 100.0

  def __call__(self):
    return self.t


def test_format_duration():
  assert format_duration(0) == "0:00:00"
  assert format_duration(61.4) == "0:01:01"
  assert format_duration(3 * 3600 + 7 * 60 + 5) == "3:07:05"
  assert format_duration(-5) == "0:00:00"


def test_lines_are_throttled_and_the_last_one_of_a_phase_always_shows():
  clock, lines = _Clock(), []
  p = RunProgress(4, lines.append, every_s=10.0, clock=clock)
  p.phase("eval x", 1, 8, "episodes ended")
  clock.t += 3
  p.phase("eval x", 2, 8)  # within 10 s of the last line: dropped
  clock.t += 3
  p.phase("eval x", 8, 8)  # complete: shown
  clock.t += 11
  p.phase("eval x", 3, 8)
  assert len(lines) == 3
  assert lines[0] == (
    "[start evaluation] eval x 1/8 episodes ended | elapsed 0:00:00 | left ?"
  )
  assert lines[1].startswith("[start evaluation] eval x 8/8 | elapsed 0:00:06")


def test_time_left_is_the_mean_step_times_steps_to_go_plus_an_evaluation():
  clock, lines = _Clock(), []
  p = RunProgress(4, lines.append, every_s=0.0, clock=clock)
  p.begin_eval(-1)
  p.end_eval(-1, 50.0)
  assert p.time_left() is None
  p.begin_step(0)
  p.end_step(0, 100.0)
  p.begin_step(1)
  p.end_step(1, 200.0)
  # 2 steps to go at 150 s each, and the final evaluation (50 s)
  assert p.time_left() == 2 * 150.0 + 50.0
  p.begin_step(2)
  clock.t += 400
  p.phase("judge", 5, 10, "steps judged")
  assert lines[-1] == (
    "[step 3/4] judge 5/10 steps judged | elapsed 0:06:40 | left ~0:05:50"
  )
  p.begin_eval(3)
  p.phase("eval y", 1, 2)
  assert lines[-1].startswith("[evaluation after step 4] eval y 1/2")


def test_final_evaluation_counts_down_and_is_unknown_after_a_resume():
  clock = _Clock()
  p = RunProgress(1, lambda _: None, clock=clock)
  p.begin_eval(-1)
  p.end_eval(-1, 60.0)
  p.begin_step(0)
  p.end_step(0, 100.0)
  assert p.time_left() == 60.0
  p.begin_eval(0)
  clock.t += 45
  assert p.time_left() == 15.0  # 60 s of evaluation, 45 s of it done
  clock.t += 100
  assert p.time_left() == 0.0
  # A resumed run: no start evaluation, so its final one has no estimate.
  resumed = RunProgress(3, lambda _: None, clock=clock)
  resumed.begin_step(2)
  resumed.end_step(2, 100.0)
  assert resumed.time_left() == 0.0
  resumed.begin_eval(2)
  assert resumed.time_left() is None


def test_a_partly_replayed_start_estimates_the_full_final_evaluation():
  p = RunProgress(2, lambda _: None, clock=_Clock())
  p.begin_eval(-1)
  p.end_eval(-1, 30.0, full_seconds=900.0)  # recorded: its full one took 900 s
  p.begin_step(0)
  p.end_step(0, 100.0)
  assert p.time_left() == 100.0 + 900.0
