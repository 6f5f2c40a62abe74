// StreamEngine module.
