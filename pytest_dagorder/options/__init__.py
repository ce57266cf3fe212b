"""The plugin's options, ini keys and markers, and the sentences that name them."""
