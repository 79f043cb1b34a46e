"""One notebook, two ways to run it: as a script (``python NB.py --flag value``) or as a page with a form
(``marimo run NB.py -- --flag value``: the flags fill the form).

Every notebook tells the two apart with ``is_script()``, reads its parameters with ``rust_rewards.params``
(``fill_params``, ``--help`` from ``exit_with_usage_if_asked``) and ends a script the user's input refused with
``one_line_errors`` (one line, exit 2). ``ScriptOrForm`` holds what differs between eval.py, inference.py and
process_data.py (their parameters, checks, words and progress); train.py's form adds presets, reward weights and a
background job (``ui.train_view``) and viz.py has nothing to run (``runs.overview.VizParams``). ``ScriptOrForm``'s
methods are the bodies of the cells every one of the three has:

* ``command_line()``: the parameters of the command line (``--help`` prints the usage and exits 0);
* ``controls(cli_params)``: the form's controls filled from them (None in a script) and its run button;
* ``form(controls, run_button, problem)``: the form, a bad value shown in red under its control;
* ``checked(cli_params, controls)``: the parameters to run with, checked as the run would (None while refused);
* ``run(params, run_button, job)``: ``job(progress)`` at once in a script, after the button in a page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import marimo as mo

from rust_rewards.params import exit_with_usage_if_asked, fill_params
from rust_rewards.params import one_line_errors as params_one_line_errors
from rust_rewards.ui.forms import check_form, param_controls, param_panel
from rust_rewards.ui.progress import marimo_progress
from rust_rewards.workspace import workspace

P = TypeVar("P")
R = TypeVar("R")
Progress = Callable[[int, int], None]


def is_script() -> bool:
    """Whether the notebook runs as a script (``python NB.py``) rather than as a page."""
    return mo.app_meta().mode == "script"


@contextmanager
def one_line_errors(prog: str) -> Iterator[None]:
    """In a script, a user's mistake ends the run with ``PROG: message`` on stderr and exit code 2
    (``rust_rewards.params.one_line_errors``); in a page it propagates to the form."""
    with params_one_line_errors(prog, enabled=is_script()):
        yield


@dataclass(frozen=True)
class ScriptOrForm(Generic[P]):
    """How one notebook takes its parameters (command line or form) and runs.

    ``check`` returns the parameters with their input paths resolved, or raises ``ValueError`` naming the flag for
    what the run would refuse before it starts; ``describe`` says in one markdown line what a run with them does.
    ``parse`` turns command-line or form values into parameters (default: ``fill_params``). In a script,
    ``script_progress`` is the run's progress (a callback, or True for the verifier's own bar) and with
    ``log_info`` INFO log lines go to the console; in a page the run's progress is a bar titled ``progress_title``.
    """

    params: type[P]
    prog: str
    check: Callable[[P], P]
    describe: Callable[[P], str]
    verb: str
    """What the run does, as in "Cannot <verb> yet."."""
    button: str
    waiting: str
    """The note shown until the run button is pressed."""
    progress_title: str
    script_progress: Progress | bool
    parse: Callable[[Mapping[str, Any]], P] | None = None
    log_info: bool = True
    remove_progress: bool = True

    def read(self, values: Mapping[str, Any]) -> P:
        """Parameters from command-line or form values; ``--help`` prints the usage and exits 0; unknown names and
        bad values raise ``ValueError`` naming the flag."""
        exit_with_usage_if_asked(self.params, values, self.prog)
        return self.parse(values) if self.parse is not None else fill_params(self.params, values)

    def command_line(self) -> P:
        """The parameters given on the command line (in a script, INFO logs go to the console first)."""
        if is_script() and self.log_info:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        with one_line_errors(self.prog):
            return self.read(mo.cli_args())

    def controls(self, cli_params: P) -> tuple[Any | None, Any]:
        """The form's controls holding ``cli_params`` (None in a script) and the run button."""
        controls = None if is_script() else param_controls(self.params, cli_params, workspace())
        return controls, mo.ui.run_button(label=self.button)

    def form(self, controls: Any | None, run_button: Any, problem: str | None) -> Any:
        """The form and its run button, ``problem`` in red under the control it names (nothing in a script)."""
        mo.stop(controls is None)
        return mo.vstack([param_panel(controls, self.params, problem=problem), run_button])

    def checked(self, cli_params: P, controls: Any | None) -> tuple[P | None, str | None, Any]:
        """``(params, None, summary)`` for the form's values (a script's: its command line), or ``(None, problem,
        red callout)`` while the run would refuse them; in a script a refusal raises."""
        if controls is None:
            with one_line_errors(self.prog):
                return self.check(cli_params), None, None
        return check_form(controls.value, self.read, self.check, self.describe, self.verb)

    def run(self, params: P | None, run_button: Any, job: Callable[[Progress | bool], R]) -> R:
        """``job(progress)``: at once in a script; in a page once the parameters pass and the button is pressed,
        with a progress bar."""
        if is_script():
            with one_line_errors(self.prog):
                return job(self.script_progress)
        mo.stop(params is None, mo.md(f"Fix the parameters above, then press **{self.button}**."))
        mo.stop(not run_button.value, mo.md(self.waiting))
        with marimo_progress(self.progress_title, remove_on_exit=self.remove_progress) as progress:
            return job(progress)
