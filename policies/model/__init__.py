"""The world the launchers form: topologies, how they recover from lost pods, and the trainer's contract."""
