public enum WALDumpPlaceholder {}
