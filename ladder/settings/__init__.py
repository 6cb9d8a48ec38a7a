"""Settings: the typed configuration Hydra composes into, its validation, the catalogue of cases and profiles, the
command line before Hydra sees it, a sweep's recorded settings, and a storage URL's credentials."""
