"""GPT-2 (GPT2LMHeadModel): the family every other is written as a difference from."""
