"""kforge.trainers: KernelForge in trainers' own environment interfaces.

    trl.py   KForgeToolEnv, TRL's GRPOTrainer(environment_factory=...)
             (docs/trainers/trl.md)
    verl.py  KForgeAgentLoop, a verl agent loop, registered as "kforge"
             (docs/trainers/verl.md)

Nothing is imported here: a trainer's config names the class by its dotted
path (``kforge.trainers.verl.KForgeAgentLoop``), which imports only that
adapter. The OpenEnv server, which any OpenEnv client drives, is
kforge.openenv.
"""
