"""An item's conversation: chat send with its gate, the agent turn, and the messages it leaves."""
