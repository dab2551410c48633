"""One package per wave of the critical path (foxlib.core.critical_path lists them): each measures,
decides on raw bytes and seconds, formats tables and draws charts. A wave imports no other wave."""
