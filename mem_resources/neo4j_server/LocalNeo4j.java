import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * Runs an embedded Neo4j Community DBMS with Bolt enabled until the JVM is told to stop.
 * All settings come from the neo4j.conf the Python launcher writes (args: home dir, conf file).
 */
public final class LocalNeo4j {
    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: LocalNeo4j <home-dir> <neo4j.conf>");
            System.exit(2);
        }
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(Path.of(args[0]))
                .loadPropertiesFromFile(Path.of(args[1]))
                .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            dbms.shutdown();
            stopped.countDown();
        }, "neo4j-shutdown"));
        System.out.println("memtend-local-neo4j: started");
        System.out.flush();
        stopped.await();
    }
}
