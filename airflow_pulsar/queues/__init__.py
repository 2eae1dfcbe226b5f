"""Message-queue providers for event-driven scheduling (``AssetWatcher``)."""
