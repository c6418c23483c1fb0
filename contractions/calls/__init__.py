"""A call's life, in one room: everything that happens to a `contract` call over its lifetime.

The stages before (parse, solve, expand, plan, schedule) are pure functions of their inputs;
what a process remembers between calls lives here, in data-flow order:

* `store`: the plan store, the full searches' decisions kept on disk for later processes;
* `remembered`: the structure key (`structure_key`, the one key of a structure) and the
  templates planned for each structure in this process;
* `tiers`: which planner serves a first call (`first_schedule`: the ``'first'``, ``'reuse'``,
  ``'quick'``, ``'stored'`` or ``'full'`` tier), the one rule of when planning pays for itself
  (`upgrade_after`), and the full search, from the store where it can (`full_search`);
* `structures`: a structure's compiled programs, which run its new shapes without planning;
* `runners`: the hot dict, the runner cache and the runner kinds (`Provisional`, the layout
  guard), as `contract`, `contract_expression` and `explain` reach them.

dev/internals.md, "The life of a call", tells the story with these names.
"""
