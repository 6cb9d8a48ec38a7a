"""What a person sees: the live view while a sweep runs, the summary at its end, and the report drawn from a sweep
folder."""
