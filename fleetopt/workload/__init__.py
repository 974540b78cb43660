"""Workloads given as data (a request trace or a length histogram) instead of fixed lengths.

`derive` reads the data when the instance is validated, so a data-given workload is an ordinary
request class everywhere (the whole mix as one class); `buckets` splits the mix at prompt-length
boundaries that separate requests whose cost differs; `routing` solves the split instance and
the simple answers it is compared with; `replay` maps trace rows onto the plan's buckets.
docs/user-guide.md, "Workloads from data", states the method.
"""
