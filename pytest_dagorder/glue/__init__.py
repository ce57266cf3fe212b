"""The pytest glue: markers, settings, planning and reports turned into core values."""
