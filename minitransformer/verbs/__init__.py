"""What a person does with a model: generate, count, trace, validate; and the closed forms, memory and parameter
counts beside the counts."""
