"""Reading captured Kafka traffic: capture files, TCP streams and Kafka framing."""
