"""Model providers: the only way compactweb talks to a model (plain Python, no Django)."""
