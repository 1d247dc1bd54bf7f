"""Process plumbing: parse isolation, bounded memos, the garbage collector's pace, crash points and
progress events."""
