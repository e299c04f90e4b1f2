"""Running the stages over each unit and saying what they found: the engine, rule config, reports, plan, docs."""
