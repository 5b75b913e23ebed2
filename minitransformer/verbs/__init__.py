"""What a person does with a model: generate, count, validate; and the closed forms, memory and parameter
counts beside the counts."""
