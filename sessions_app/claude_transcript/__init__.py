"""Claude Code transcripts (issue 35): reading them (`parse`) and turning them into compactweb lines (`convert`),
in plain Python. Nothing here imports Django."""

from sessions_app.claude_transcript.convert import (
    BRANCH_SOURCE,
    COST_STATE_USAGE,
    EPOCH,
    FORMAT,
    SERVER_USAGE,
    TranscriptReader,
)
from sessions_app.claude_transcript.convert import Chunk as TranscriptChunk
from sessions_app.claude_transcript.parse import (
    Entry,
    is_claude_transcript_line,
    is_transcript_file,
    looks_like_claude_transcript,
)

__all__ = [
    "BRANCH_SOURCE",
    "COST_STATE_USAGE",
    "EPOCH",
    "FORMAT",
    "SERVER_USAGE",
    "Entry",
    "TranscriptChunk",
    "TranscriptReader",
    "is_claude_transcript_line",
    "is_transcript_file",
    "looks_like_claude_transcript",
]
