"""Model providers: one small interface of our own, adapters over the official SDKs."""
