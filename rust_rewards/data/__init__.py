"""Task data: importers, SFT rows and DPO pairs built from tasks."""
