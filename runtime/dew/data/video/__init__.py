"""Video clips with their audio: the decoding every video path shares (decode), the audio model's
inputs (audio), and the video specs (VideoDataset and its kinds, found by the registry)."""
