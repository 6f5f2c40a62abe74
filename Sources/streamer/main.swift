print("streamer")
