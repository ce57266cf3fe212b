"""What a suite declares (markers, resources, the edges file), read into plain edges."""
