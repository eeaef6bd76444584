"""DVC entry points, one module per stage: parse params, read Parquet, run a flow, write
Parquet atomically. Nothing else lives here."""
