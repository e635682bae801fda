"""The results page: reads the runs' records and says what they claim. RESULTS.md, the README's summary and
``report --plan`` are built here (python -m experiments.report); no driver and nothing in pfd_jax imports it.

* :mod:`~experiments.page.judged`: what each driver's runs claim, by the driver's name, declared before any run;
* :mod:`~experiments.page.claims`, :mod:`~experiments.page.sweeps`, :mod:`~experiments.page.declared`: claims in
  their forms, their verdicts and Holm's adjustment;
* :mod:`~experiments.page.family`: the papers' claims declared once, each with the run that decides it, and
  :mod:`~experiments.page.deciding`: the sequential members' tests on committed draws;
* :mod:`~experiments.page.frozen`: whether a member was declared before the run that decides it;
* :mod:`~experiments.page.familypage`, :mod:`~experiments.page.analoguepage`, :mod:`~experiments.page.pagelayout`:
  how RESULTS.md shows them;
* :mod:`~experiments.page.pagefiles`, :mod:`~experiments.page.published`: the page's copy of its runs (published/)
  and ``--check`` against it; :mod:`~experiments.page.staleness`: when a published run is still the code's result;
* :mod:`~experiments.page.pageplan`: the runs the page lacks, their commands and expected times.
"""
