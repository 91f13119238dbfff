"""srbench's model zoo: providers of named model cases (entry-point group ``srbench.model_providers``).

- ``builtin``: pure-torch architectures written here from their papers (always available).
- ``hf``: Hugging Face ``transformers`` models, random-initialised from configs, offline.
- ``tv``: torchvision's classification models, when torchvision imports.
"""
