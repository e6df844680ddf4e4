"""What a step, a run and its INIT phase will cost, from the dress's answer (train wing; nothing here imports tinygrad,
so the audit can import it).

events.py is one step's simulated timeline (Event), picture.py draws it as an SVG, totrain.py turns a step time into
a time to train (MLCommons' RCP or tinycorp's published convergence x the step, the evals, the warm-up), init.py the
INIT phase's time (distinct programs x BEAM seconds a program), answer.py fills the dress's answer with both.
The step itself: hardware.py holds every constant with its source, kernel.py a kernel's and a copy's time,
simulate.py plays each device's compute and copy queues over one step, predict.py gives the dress's answer["cost"].
"""
