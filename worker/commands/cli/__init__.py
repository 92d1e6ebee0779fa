"""The `evalstream` command line: `main` (the dispatcher), what every command's parser shares
(`arguments`), what a failure tells the user (`explained`), and one module per command with its
flags and its handler, which loads the command's work (`worker.commands`) only when it runs;
a flag's default that the work defines is imported with the parser."""
