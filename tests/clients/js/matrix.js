// One kafkajs call against a cluster, for the client matrix: `node matrix.js BOOTSTRAP OP [ARG...]`.
// Prints the call's result as one JSON line on stdout; a failure prints {"error", "type"} and
// exits 1, so the test reads what kafkajs itself reported.
'use strict'

const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')

const [bootstrap, op, ...args] = process.argv.slice(2)
const kafka = new Kafka({
  clientId: 'matrix-kafkajs',
  brokers: [bootstrap],
  logLevel: logLevel.NOTHING,
  requestTimeout: 15000,
  retry: { retries: 2 },
})

const RESOURCE = { topic: ConfigResourceTypes.TOPIC, broker: ConfigResourceTypes.BROKER }

async function withAdmin(body) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await body(admin)
  } finally {
    await admin.disconnect()
  }
}

const ops = {
  cluster: () => withAdmin((a) => a.describeCluster()),
  list: () => withAdmin((a) => a.listTopics()),
  create: (topic, partitions, rf) => withAdmin((a) => a.createTopics({
    waitForLeaders: true,
    topics: [{ topic, numPartitions: Number(partitions), replicationFactor: Number(rf) }],
  })),
  describe: (topic) => withAdmin((a) => a.fetchTopicMetadata({ topics: [topic] })),
  partitions: (topic, count) => withAdmin((a) => a.createPartitions({ topicPartitions: [{ topic, count: Number(count) }] })),
  delete: (topic) => withAdmin((a) => a.deleteTopics({ topics: [topic] })),
  'describe-configs': (type, name) => withAdmin((a) => a.describeConfigs({
    includeSynonyms: false, resources: [{ type: RESOURCE[type], name }],
  })),
  'alter-configs': (type, name, key, value) => withAdmin((a) => a.alterConfigs({
    validateOnly: false, resources: [{ type: RESOURCE[type], name, configEntries: [{ name: key, value }] }],
  })),
  reassign: (topic, partition, replicas) => withAdmin((a) => a.alterPartitionReassignments({
    topics: [{ topic, partitionAssignment: [{ partition: Number(partition), replicas: JSON.parse(replicas) }] }],
  })),
  'list-reassignments': (topic, partitions) => withAdmin((a) => a.listPartitionReassignments({
    topics: [{ topic, partitions: JSON.parse(partitions) }],
  })),
  produce: async (topic) => {
    const producer = kafka.producer({ allowAutoTopicCreation: false })
    await producer.connect()
    try {
      return await producer.send({ topic, messages: [{ value: 'x' }] })
    } finally {
      await producer.disconnect()
    }
  },
  consume: async (topic) => {
    const consumer = kafka.consumer({ groupId: 'matrix-group', retry: { retries: 2 } })
    try {
      await consumer.connect()
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      // run() reports its failure through the crash event, not by rejecting.
      const crashed = new Promise((resolve, reject) => consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error)))
      await consumer.run({ eachMessage: async () => {} })
      return await crashed
    } finally {
      await consumer.disconnect()
    }
  },
}

ops[op](...args).then(
  (result) => { process.stdout.write(JSON.stringify(result === undefined ? null : result) + '\n') },
  (error) => {
    process.stdout.write(JSON.stringify({ error: String(error.message), type: error.type || error.name }) + '\n')
    process.exitCode = 1
  },
)
